"""Tools that generate or check the book (docs/): not part of the installed package."""
