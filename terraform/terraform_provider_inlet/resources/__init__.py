"""One module per resource type: its schema, how it maps to Inlet's API, and its lifecycle."""
