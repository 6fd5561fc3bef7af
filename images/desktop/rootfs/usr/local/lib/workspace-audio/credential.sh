# shellcheck shell=bash
# The audio bridges' credential check, sourced by workspace-audio-out and workspace-audio-in (socat runs them per
# TCP connection; stdin and stdout are the connection). The ports are published like VNC's, so they take only a
# client that proves it holds the workspace's credential, the secret VNC requires (VNC_PASSWORD): its first line
# must be that secret. start-desktop keeps only the secret's SHA-256 digest, in $AUDIO_CREDENTIAL_FILE.
#
# Protocol: the client sends `<secret>\n` within AUDIO_CREDENTIAL_TIMEOUT_S seconds; the bridge answers `OK\n` and
# then streams (audio) or takes PCM (microphone). A client that sends nothing, too much or the wrong secret gets
# no byte at all: the bridge exits and socat closes the connection.
AUDIO_CREDENTIAL_FILE=/tmp/workspace-audio/credential
AUDIO_CREDENTIAL_TIMEOUT_S=5
AUDIO_CREDENTIAL_MAX_CHARS=256

# Succeeds when the connection's first line is the credential. Digests are compared rather than the secrets: how
# long the comparison takes then tells nothing usable about the secret.
audio_client_authenticated() {
  local expected line given
  expected=$(cat "$AUDIO_CREDENTIAL_FILE" 2>/dev/null) || return 1
  [[ "$expected" =~ ^[0-9a-f]{64}$ ]] || return 1
  # bash reads a socket one byte at a time, so nothing after the line (the first PCM) is consumed here.
  IFS= read -r -t "$AUDIO_CREDENTIAL_TIMEOUT_S" -n "$AUDIO_CREDENTIAL_MAX_CHARS" line || return 1
  # -n stops without a newline after its maximum: that is no credential line.
  (( ${#line} > 0 && ${#line} < AUDIO_CREDENTIAL_MAX_CHARS )) || return 1
  # printf is a shell builtin: the secret appears in no process's argv.
  given=$(printf '%s' "$line" | sha256sum) || return 1
  [[ "${given%% *}" == "$expected" ]]
}
