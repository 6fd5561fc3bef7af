/**
 * Shell scripts run in the workspace as its own (sandboxed) user through Docker's exec: POSIX sh and coreutils or
 * busybox only, so any image works. Names reach them as environment variables, never spliced into the script.
 * Each acts as the user so the user's permissions bound what a transfer can touch; Docker's archive API itself
 * runs as root, so the scripts hand it the physical directory (`pwd -P`) they checked.
 */

/**
 * Makes ~/Uploads, checks the user may write there; prints uid, gid and the directory's physical path, one a line.
 * Also removes temporary files a day old: left only when an api process died mid-upload (a live upload's file
 * keeps changing).
 */
export const PREPARE_UPLOADS = `mkdir -p -- "$HOME/Uploads" && cd -- "$HOME/Uploads" && [ -w . ] || exit 1
find . -maxdepth 1 -name '.ws-upload-*.part' -mmin +1440 -exec rm -f {} + 2>/dev/null
id -u && id -g && pwd -P`;

/**
 * Moves the completed temporary file WS_TEMP to WS_NAME in ~/Uploads without replacing anything: a taken name
 * gets " (1)", " (2)" … before its extension. A hard link claims the name atomically (two uploads of one name
 * never overwrite each other); on a file system without hard links a checked mv does. Prints the name used.
 */
export const FINISH_UPLOAD = `cd -- "$HOME/Uploads" || exit 3
case "$WS_NAME" in ?*.*) stem="\${WS_NAME%.*}"; ext=".\${WS_NAME##*.}" ;; *) stem="$WS_NAME"; ext="" ;; esac
t="$WS_NAME"; i=1
while :; do
  if [ ! -e "$t" ] && [ ! -L "$t" ]; then
    if ln -- "$WS_TEMP" "$t" 2>/dev/null; then rm -f -- "$WS_TEMP"; break; fi
    if [ ! -e "$t" ] && [ ! -L "$t" ] && mv -- "$WS_TEMP" "$t"; then break; fi
  fi
  if [ "$i" -gt 999 ] || [ ! -e "$WS_TEMP" ]; then rm -f -- "$WS_TEMP"; exit 4; fi
  t="$stem ($i)$ext"; i=$((i + 1))
done
printf '%s' "$t"`;

/** Removes the temporary file of an upload that failed part way. */
export const DISCARD_UPLOAD = 'rm -f -- "$HOME/Uploads/$WS_TEMP"';

/**
 * Lists the regular files (not symlinks) of ~/Downloads, at most WS_MAX: `size mtime<TAB>name<NUL>` each, and
 * `more<NUL>` when there were more. No ~/Downloads lists nothing.
 */
export const LIST_DOWNLOADS = `cd -- "$HOME/Downloads" 2>/dev/null || exit 0
n=0
for f in * .[!.]* ..?*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  n=$((n + 1))
  if [ "$n" -gt "$WS_MAX" ]; then printf 'more\\0'; break; fi
  s=$(stat -c '%s %Y' -- "$f") || continue
  printf '%s\\t%s\\0' "$s" "$f"
done`;

/** Checks WS_NAME in ~/Downloads is a regular file the user may read; prints the directory's physical path. */
export const LOCATE_DOWNLOAD = 'cd -- "$HOME/Downloads" 2>/dev/null && [ -f "$WS_NAME" ] && [ ! -L "$WS_NAME" ] && [ -r "$WS_NAME" ] && pwd -P';
