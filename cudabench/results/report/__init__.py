"""What a reader sees: the terminal tables, the HTML page, and how figures read (units)."""
