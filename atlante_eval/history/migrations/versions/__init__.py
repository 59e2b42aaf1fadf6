"""One module per schema revision of the history store, oldest first."""
