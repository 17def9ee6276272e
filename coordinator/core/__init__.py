"""Core of the coordinator: settings and errors."""
