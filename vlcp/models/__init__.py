from vlcp.models.clip import create_clip, register_configs

__all__ = ["create_clip", "register_configs"]
