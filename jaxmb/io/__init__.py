"""Model file formats."""
