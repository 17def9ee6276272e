"""Configuration and the domain errors of the center agent."""
