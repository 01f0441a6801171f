"""WeCom (企业微信) bots (a self-built app's callbacks, an intelligent robot's long connection)."""
