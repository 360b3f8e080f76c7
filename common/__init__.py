"""The base below the four packages: file I/O (``fileio``), output folders (``outdir``), the command-line
contract (``cli``: help format, label and number types, one input-error type, one top-level handler,
signals) and the error type every package raises for bad input (``errors``). It imports no other package of
the project; every package may import it."""
