"""How the work runs: datatrove executors, the pipeline steps, progress, the staging folder and fault points."""
