/**
 * Shell scripts run in the workspace as its own (sandboxed) user through Docker's exec: POSIX sh and coreutils or
 * busybox only, so any image works. Names reach them as environment variables, never spliced into the script.
 *
 * The file's bytes themselves pass through these scripts (stdin for an upload, stdout for a download), so every
 * open is the kernel's decision for that user: a symlink or a swapped directory can only lead where the user could
 * go anyway. Nothing computed in the container is ever handed to a root-privileged call (Docker's archive API).
 * Each script enters its directory once (`cd -P`) and works relative to it, so a later swap of ~/Uploads or
 * ~/Downloads cannot split one transfer across two directories.
 */

/**
 * Exit codes the service tells apart. The scripts exit with these, or with the shell's own status when a
 * redirection fails on the way.
 */
export const SCRIPT_EXIT = {
  /** ~/Uploads cannot be made or written, or ~/Downloads is missing. */
  noDirectory: 3,
  /** The file is not there, not a regular file, a symlink, or not readable by the user. */
  notAFile: 4,
  /** The directory's real path has a control character or a name starting or ending with a space. */
  oddDirectory: 5,
  /** Fewer bytes arrived than announced (upload), or the file is over the limit (download). */
  wrongSize: 6,
  /** No free name for the upload. */
  noName: 7,
} as const;

/**
 * Enters $1's directory physically (`cd -P`) and refuses a real path whose names are odd: a control character
 * anywhere, or a space at either end of a name (the kind of path that misleads a reader or a line-based parser).
 * `$PWD` after `cd -P` is that real path, with nothing stripped (unlike `$(pwd -P)`, which drops trailing newlines).
 */
const ENTER = (dir: string, missing: number) => `cd -P -- "$HOME/${dir}" 2>/dev/null || exit ${missing}
case "$PWD/" in *[[:cntrl:]]* | *' /'* | *'/ '*) exit ${SCRIPT_EXIT.oddDirectory} ;; esac`;

/**
 * Makes ~/Uploads and checks the user may write there (answered before the body is read). Also removes temporary
 * files a day old: left only when a transfer died with its container (a live upload's file keeps changing).
 */
export const PREPARE_UPLOADS = `mkdir -p -- "$HOME/Uploads" 2>/dev/null
${ENTER('Uploads', SCRIPT_EXIT.noDirectory)}
[ -w . ] || exit ${SCRIPT_EXIT.noDirectory}
find . -maxdepth 1 -name '.ws-upload-*.part' -mmin +1440 -exec rm -f {} + 2>/dev/null
exit 0`;

/**
 * Receives an upload on stdin: exactly WS_SIZE bytes into the new temporary file WS_TEMP (created exclusively:
 * noclobber refuses an existing name or symlink), then gives it the name WS_NAME without replacing anything: a
 * taken name gets " (1)", " (2)" … before its extension. A hard link claims the name atomically (two uploads of
 * one name never overwrite each other); on a file system without hard links a checked mv does. Fewer bytes than
 * announced (the body was cut short) or any failure removes the temporary file here, in the directory entered.
 * Prints the name used.
 */
export const RECEIVE_UPLOAD = `${ENTER('Uploads', SCRIPT_EXIT.noDirectory)}
umask 022
set -C
head -c "$WS_SIZE" > "$WS_TEMP" || { rm -f -- "$WS_TEMP"; exit ${SCRIPT_EXIT.noDirectory}; }
set +C
[ "$(stat -c %s -- "$WS_TEMP")" = "$WS_SIZE" ] || { rm -f -- "$WS_TEMP"; exit ${SCRIPT_EXIT.wrongSize}; }
case "$WS_NAME" in ?*.*) stem="\${WS_NAME%.*}"; ext=".\${WS_NAME##*.}" ;; *) stem="$WS_NAME"; ext="" ;; esac
t="$WS_NAME"; i=1
while :; do
  if [ ! -e "$t" ] && [ ! -L "$t" ]; then
    if ln -- "$WS_TEMP" "$t" 2>/dev/null; then rm -f -- "$WS_TEMP"; break; fi
    if [ ! -e "$t" ] && [ ! -L "$t" ] && mv -- "$WS_TEMP" "$t"; then break; fi
  fi
  if [ "$i" -gt 999 ] || [ ! -e "$WS_TEMP" ]; then rm -f -- "$WS_TEMP"; exit ${SCRIPT_EXIT.noName}; fi
  t="$stem ($i)$ext"; i=$((i + 1))
done
printf '%s' "$t"`;

/**
 * Lists the regular files (not symlinks) of ~/Downloads the user may read, at most WS_MAX: `size mtime<TAB>name<NUL>` each, and
 * `more<NUL>` when there were more. No ~/Downloads lists nothing.
 */
export const LIST_DOWNLOADS = `${ENTER('Downloads', 0)}
n=0
for f in * .[!.]* ..?*; do
  [ -f "$f" ] && [ ! -L "$f" ] && [ -r "$f" ] || continue
  n=$((n + 1))
  if [ "$n" -gt "$WS_MAX" ]; then printf 'more\\0'; break; fi
  s=$(stat -c '%s %Y' -- "$f") || continue
  printf '%s\\t%s\\0' "$s" "$f"
done`;

/**
 * Sends ~/Downloads/WS_NAME on stdout: first its size and a newline, then exactly that many bytes. Only a regular
 * file, not a symlink, that the user can open; the file is opened once (fd 3) and the size and bytes come from
 * that open file, which must still be the one the name stands for (same device and inode: a name swapped for a
 * symlink between the checks and the open is refused). Over WS_MAX_BYTES: the size line, then exit.
 */
export const SEND_DOWNLOAD = `${ENTER('Downloads', SCRIPT_EXIT.notAFile)}
[ -f "$WS_NAME" ] && [ ! -L "$WS_NAME" ] && [ -r "$WS_NAME" ] || exit ${SCRIPT_EXIT.notAFile}
exec 3< "$WS_NAME"
[ -f /dev/fd/3 ] && [ "$(stat -L -c '%d:%i' /dev/fd/3)" = "$(stat -c '%d:%i' -- "$WS_NAME")" ] || exit ${SCRIPT_EXIT.notAFile}
size=$(stat -L -c %s /dev/fd/3) || exit ${SCRIPT_EXIT.notAFile}
printf '%s\\n' "$size"
[ "$size" -le "$WS_MAX_BYTES" ] || exit ${SCRIPT_EXIT.wrongSize}
exec head -c "$size" <&3`;
