"""Running code in a sandbox made with bubblewrap (docs/sandbox.md).

No Django here: ``runner`` starts and watches one sandbox, ``command`` is
its bubblewrap command line, ``launcher`` runs inside it, ``probe`` says
whether this host can run one, and ``calls`` is a sandboxed run as a tool
call sees it (files in and out, the model's text).
"""
