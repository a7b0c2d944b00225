"""Raw drop files (JSON lines, parquet, WARC / WET, HF datasets) -> sharded Dolma records."""
