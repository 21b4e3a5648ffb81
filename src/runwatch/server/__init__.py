"""The runwatch HTTP server: FastAPI app factory, routes, auth and live streams."""
