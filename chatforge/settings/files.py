"""Files: where their bytes are kept, and the limits on them (docs/files.md)."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from chatforge.settings.env import env

from .base import BASE_DIR

# "local": a directory (embedded mode, or hosts that share it, e.g. a volume);
# "s3": an S3-compatible bucket through django-storages, which every web and
# worker host reads alike.
CHATFORGE_FILES_STORAGE: str = env.str("CHATFORGE_FILES_STORAGE", default="local")
CHATFORGE_FILES_DIR: str = env.str("CHATFORGE_FILES_DIR", default=str(BASE_DIR / "chatforge-files"))
CHATFORGE_FILES_S3_BUCKET: str = env.str("CHATFORGE_FILES_S3_BUCKET", default="")
CHATFORGE_FILES_S3_ENDPOINT_URL: str = env.str("CHATFORGE_FILES_S3_ENDPOINT_URL", default="")
CHATFORGE_FILES_S3_REGION: str = env.str("CHATFORGE_FILES_S3_REGION", default="")
# The largest file accepted (413 beyond), the files one message may carry,
# and the bytes a user may keep stored (the admin's file quotas override it).
CHATFORGE_MAX_FILE_BYTES: int = env.int("CHATFORGE_MAX_FILE_BYTES", default=64 * 1024 * 1024)
CHATFORGE_MAX_FILES_PER_MESSAGE: int = env.int("CHATFORGE_MAX_FILES_PER_MESSAGE", default=10)
CHATFORGE_USER_FILE_BYTES: int = env.int("CHATFORGE_USER_FILE_BYTES", default=1024 * 1024 * 1024)
# The most text kept of one document, and how much of its attachments'
# text one message gives the model (tokens, counted as 4 characters each).
CHATFORGE_FILE_TEXT_MAX_CHARS: int = env.int("CHATFORGE_FILE_TEXT_MAX_CHARS", default=2_000_000)
CHATFORGE_ATTACHMENT_TEXT_TOKENS: int = env.int("CHATFORGE_ATTACHMENT_TEXT_TOKENS", default=32_000)
# The longest a run's first turn waits for its documents' text to be read.
CHATFORGE_FILE_READ_WAIT_S: float = env.float("CHATFORGE_FILE_READ_WAIT_S", default=120.0)

# Django's storages: its defaults for "default" and "staticfiles", and ours.
if CHATFORGE_FILES_STORAGE == "local":
    _files_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        # Never served from a URL of its own: downloads go through the API's owner check.
        "OPTIONS": {"location": CHATFORGE_FILES_DIR, "base_url": None, "file_permissions_mode": 0o600,
                    "directory_permissions_mode": 0o700},
    }
elif CHATFORGE_FILES_STORAGE == "s3":
    if not CHATFORGE_FILES_S3_BUCKET:
        raise ImproperlyConfigured(
            "CHATFORGE_FILES_STORAGE=s3 needs CHATFORGE_FILES_S3_BUCKET (and the bucket's credentials in "
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the host's role)."
        )
    # Imported here: only an S3 deployment pays for boto3 at start-up.
    from boto3.s3.transfer import TransferConfig as _TransferConfig

    # How files are sent. Up to 64 MiB (CHATFORGE_MAX_FILE_BYTES' default),
    # one PUT streamed from the file: s3transfer copies each part of a
    # multipart upload into memory, but a single PUT reads the file as it
    # sends. Bigger files go in 8 MiB parts, at most 4 in flight and 4 in
    # memory (boto3's defaults, 10 of each, hold 80 MiB per upload).
    _files_transfer = _TransferConfig(
        multipart_threshold=64 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024, max_concurrency=4,
    )
    _files_transfer.max_in_memory_upload_chunks = 4  # s3transfer's own knob, not an argument of boto3's
    _files_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": CHATFORGE_FILES_S3_BUCKET,
            # Empty: AWS itself. Another S3-compatible store (MinIO, Ceph,
            # R2...) by URL; botocore then addresses buckets by path.
            "endpoint_url": CHATFORGE_FILES_S3_ENDPOINT_URL or None,
            "region_name": CHATFORGE_FILES_S3_REGION or None,
            # Credentials are not settings of ours: django-storages and boto3
            # read AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
            # AWS_SESSION_TOKEN), else boto3's chain (profile, web identity,
            # instance role).
            # Private objects (the bucket's own policy), never overwritten (our
            # keys are unique). url() is never used, downloads go through the
            # API's owner check; were it called, it would sign, not expose.
            "default_acl": None,
            "file_overwrite": False,
            "querystring_auth": True,
            # A file opened for reading is downloaded into a spooled temporary
            # file: beyond 1 MiB it goes to disk (django-storages' default, 0,
            # keeps the whole object in memory).
            "max_memory_size": 1024 * 1024,
            "transfer_config": _files_transfer,
        },
    }
else:
    raise ImproperlyConfigured(
        f"CHATFORGE_FILES_STORAGE is {CHATFORGE_FILES_STORAGE!r}; use 'local' (a directory) or 's3' (a bucket)."
    )
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "chatforge_files": _files_storage,
}
