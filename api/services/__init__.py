"""Services: what a route does, in library terms (routes stay thin: route → service → library)."""
