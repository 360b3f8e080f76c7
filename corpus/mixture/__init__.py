"""The mixture in tokens, and where each kept document goes: plan, validation hold-out, selection, layout, sizes."""
