"""What shows the measurements: report.json/.md/.html and its figures, the token viewer, the explorer and its web app."""
