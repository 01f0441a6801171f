"""Feishu/Lark bots (long connection or HTTP events): a platform of `channels/registry.py`."""
