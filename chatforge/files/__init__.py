"""Files in a conversation: uploads and files tools made, their bytes in the
files storage, and the text read from documents (docs/files.md)."""
