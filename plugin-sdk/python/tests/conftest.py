"""pytest of the SDK's own tests. ``every_helper/`` is a plugin with its own ``app`` module:
``build test`` runs it in a pytest of its own, as it does each example."""

collect_ignore = ["every_helper", "raises_type_error"]
