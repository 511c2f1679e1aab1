"""Results: the records, the results file schema, compare, Rich tables, plots and suite files."""
