"""Embedders: how a chunk becomes a vector. ``embed`` picks one (static or transformer) and
embeds; ``model`` finds the transformer; ``recipe`` and ``static`` make the static model,
``distill`` its offline build; ``cache`` reuses vectors by content hash."""
