"""The app's widgets, one module per screen region."""
