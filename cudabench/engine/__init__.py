"""The engine: plans subjects, hands them to isolated worker processes, watches them, and collects
their results. Nothing here times anything."""
