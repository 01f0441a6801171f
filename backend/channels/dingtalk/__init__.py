"""DingTalk robots (Stream mode or HTTP callbacks): a platform of `channels/registry.py`."""
