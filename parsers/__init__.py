"""Report parsers: one file per format, each yields plain rows in normalised units."""
