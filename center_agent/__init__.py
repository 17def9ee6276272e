"""Center agent service (hospital side). Built in its own issue; empty until then."""
