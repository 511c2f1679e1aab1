"""One exporter per file format: the results document (JSON, also read back), CSV, Markdown, over shared flat rows."""
