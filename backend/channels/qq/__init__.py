"""QQ bots (QQ Bot Open Platform, webhook or websocket): a platform of `channels/registry.py`."""
