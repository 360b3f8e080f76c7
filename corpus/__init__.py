"""Token shards from raw multilingual text, mixed in tokens: the build's stages and its ``config`` at the top,
one sub-package per concern below them (each one's docstring names it). The layering is docs/corpus.md's
"Python API" table."""
