"""Tenants and their bots."""
