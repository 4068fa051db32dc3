"""Numbers and hardware: bench statistics (``benchstats.py``), device ceilings and the
roofline (``ceilings.py``), the roofline at the observed clock (``clockscale.py``), the
reference's cached times (``reftimes.py``), the user's checks running at once
(``livechecks.py``), waiting for an idle GPU (``gpuidle.py``), ncu
CSV (``ncu.py``), and artefacts read like an expert (``dumps.py``)."""
