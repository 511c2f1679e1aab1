"""The command line: app.py wires one module per command group. The only place that prints and turns
errors into exit codes."""
