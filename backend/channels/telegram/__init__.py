"""Telegram bots (the Bot API, over `python-telegram-bot`): a platform of `channels/registry.py`."""
