"""Pictures: the sweep and history plots, the sync lesson's timeline."""
