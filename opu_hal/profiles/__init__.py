"""Device profiles: the TOML catalogue (find, read, validate, explain) and the backend registry."""

from .catalogue import list_profiles, load_profile, validate_profile

__all__ = ["list_profiles", "load_profile", "validate_profile"]
