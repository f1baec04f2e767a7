"""Layer 7, observing: pictures and reports of what the layers below recorded."""
