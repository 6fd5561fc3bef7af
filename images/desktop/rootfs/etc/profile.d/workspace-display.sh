# The desktop's X server is :1 (started by /usr/local/bin/start-desktop).
# The image also sets ENV DISPLAY=:1, so `docker exec` sees it too.
: "${DISPLAY:=:1}"
export DISPLAY
