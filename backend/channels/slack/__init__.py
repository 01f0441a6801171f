"""Slack bots (Socket Mode or the Events API) over the shared bot skeleton."""
