"""The shard format and manifest, their verification, and the document keys a shard set keeps."""
