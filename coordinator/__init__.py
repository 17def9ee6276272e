"""Coordinator service (analyst side). Built in its own issue; empty until then."""
