"""Discord bots: one tenant's bot on the gateway (discord.py), replies over the REST API."""
