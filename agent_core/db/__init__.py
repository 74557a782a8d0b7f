"""Database plumbing: declarative base, engine factory, typed models."""
