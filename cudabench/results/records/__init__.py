"""Records and how they are kept: the records (model), as plain data (codec), the file check (schema), statistics."""
