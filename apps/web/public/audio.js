// Workspace audio in the browser: the workspace's sound (Opus packets from the gateway's audio route, decoded
// with WebCodecs and played through Web Audio) and the microphone (PCM, s16le 48 kHz mono, to audio_input).
import { h } from './ui.js';

const { AudioContext, AudioDecoder, EncodedAudioChunk, WebSocket } = window;

/** Audio is scheduled this far ahead of the clock: enough to ride out network jitter, little enough to stay live. */
const JITTER_SECONDS = 0.08;
/** Further ahead than this (a stall, a backgrounded tab) and playback skips forward instead of falling behind. */
const MAX_AHEAD_SECONDS = 0.4;
const PACKET_MICROSECONDS = 20_000;
/** Samples per microphone message: 1024 at 48 kHz is about 21 ms. */
const MIC_FRAME = 1024;

/** ws(s)://<this host><path>: same origin, so the stream cookie goes along. */
function socketUrl(path) {
  const url = new URL(path, location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.hash = '';
  return url.href;
}

/**
 * Audio controls of a session. `streamPath` is the VNC stream's path (…/vnc); the audio routes sit beside it.
 * Answers `{controls, start(), close()}`: `controls` are control-panel buttons (none when the settings forbid
 * both), `start()` begins playback when the workspace's audio is on by default (workspace_audio_default_on).
 */
export function createAudio({ streamPath, settings, viewOnly }) {
  const base = streamPath.replace(/\/vnc$/, '');
  const canListen = settings.allow_workspace_audio === true && typeof AudioDecoder === 'function';
  const canSpeak = settings.allow_workspace_microphone === true && !viewOnly && Boolean(navigator.mediaDevices?.getUserMedia);
  const speaker = canListen ? createSpeaker(`${base}/audio`) : null;
  const microphone = canSpeak ? createMicrophone(`${base}/audio_input`) : null;
  const controls = [];

  if (speaker) {
    const button = h('button', { type: 'button', id: 'audio-button', 'aria-pressed': 'false' }, 'Unmute');
    const sync = () => {
      button.setAttribute('aria-pressed', String(speaker.on));
      button.textContent = speaker.unavailable ? 'No audio' : speaker.on ? 'Mute' : 'Unmute';
      button.disabled = speaker.unavailable;
      button.title = speaker.unavailable ? 'This workspace has no sound' : '';
    };
    speaker.onChange = sync;
    button.addEventListener('click', () => (speaker.on ? speaker.mute() : speaker.unmute()));
    sync();
    controls.push(button);
  }
  if (microphone) {
    const button = h('button', { type: 'button', id: 'microphone-button', 'aria-pressed': 'false' }, 'Microphone');
    const sync = () => {
      button.setAttribute('aria-pressed', String(microphone.on));
      button.textContent = microphone.error ? 'Microphone unavailable' : microphone.on ? 'Microphone off' : 'Microphone';
      button.title = microphone.error ?? '';
    };
    microphone.onChange = sync;
    button.addEventListener('click', () => (microphone.on ? microphone.stop() : microphone.start()));
    controls.push(button);
  }

  // For tests and diagnostics: the level of what is being played (0..1), and the microphone's state.
  window.__workspaceAudio = { level: () => speaker?.level() ?? 0, speaker, microphone };

  return {
    controls,
    start() {
      if (speaker && settings.workspace_audio_default_on === true) speaker.unmute();
    },
    close() {
      speaker?.mute();
      microphone?.stop();
      speaker?.dispose();
      if (window.__workspaceAudio?.speaker === speaker) window.__workspaceAudio = null;
    },
  };
}

/** The workspace's sound: streamed only while unmuted (a muted client costs the workspace no encoder). */
function createSpeaker(path) {
  const speaker = { on: false, unavailable: false, onChange: () => undefined, unmute, mute, level, dispose };
  let context = null;
  let analyser = null;
  let samples = null;
  let socket = null;
  let decoder = null;
  let nextTime = 0;
  let timestamp = 0;
  const resumeOnGesture = () => void context?.resume().catch(() => undefined);

  function ensureContext() {
    if (context) return;
    context = new AudioContext({ sampleRate: 48_000, latencyHint: 'interactive' });
    analyser = context.createAnalyser();
    analyser.fftSize = 2048;
    samples = new Float32Array(analyser.fftSize);
    analyser.connect(context.destination);
    // Browsers start audio only after a user gesture: the unmute click is one; any later one resumes too.
    for (const type of ['pointerdown', 'keydown']) window.addEventListener(type, resumeOnGesture, { capture: true });
  }

  function unmute() {
    if (speaker.on || speaker.unavailable) return;
    ensureContext();
    context.resume().catch(() => undefined);
    speaker.on = true;
    connect();
    speaker.onChange();
  }

  function mute() {
    if (!speaker.on) return;
    speaker.on = false;
    disconnect();
    speaker.onChange();
  }

  function connect() {
    nextTime = 0;
    timestamp = 0;
    decoder = new AudioDecoder({ output: play, error: () => undefined });
    decoder.configure({ codec: 'opus', sampleRate: 48_000, numberOfChannels: 2 });
    const ws = new WebSocket(socketUrl(path));
    ws.binaryType = 'arraybuffer';
    let opened = false;
    ws.addEventListener('open', () => (opened = true));
    ws.addEventListener('message', (event) => {
      if (typeof event.data === 'string' || decoder?.state !== 'configured') return;
      decoder.decode(new EncodedAudioChunk({ type: 'key', timestamp, data: event.data }));
      timestamp += PACKET_MICROSECONDS;
    });
    ws.addEventListener('close', () => {
      if (socket !== ws) return;
      // Refused before it opened (the image has no sound, or the settings changed): say so, stop trying.
      if (!opened) speaker.unavailable = true;
      speaker.on = false;
      disconnect();
      speaker.onChange();
    });
    socket = ws;
  }

  function disconnect() {
    const ws = socket;
    socket = null;
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close();
    if (decoder && decoder.state !== 'closed') decoder.close();
    decoder = null;
  }

  function play(data) {
    try {
      if (!speaker.on || !context) return;
      const buffer = context.createBuffer(data.numberOfChannels, data.numberOfFrames, data.sampleRate);
      for (let channel = 0; channel < data.numberOfChannels; channel++) {
        const plane = new Float32Array(data.numberOfFrames);
        data.copyTo(plane, { planeIndex: channel, format: 'f32-planar' });
        buffer.copyToChannel(plane, channel);
      }
      const now = context.currentTime;
      if (nextTime < now + JITTER_SECONDS / 2 || nextTime > now + MAX_AHEAD_SECONDS) nextTime = now + JITTER_SECONDS;
      const source = context.createBufferSource();
      source.buffer = buffer;
      source.connect(analyser);
      source.start(nextTime);
      nextTime += buffer.duration;
    } finally {
      data.close();
    }
  }

  function level() {
    if (!analyser) return 0;
    analyser.getFloatTimeDomainData(samples);
    let sum = 0;
    for (const v of samples) sum += v * v;
    return Math.sqrt(sum / samples.length);
  }

  function dispose() {
    for (const type of ['pointerdown', 'keydown']) window.removeEventListener(type, resumeOnGesture, { capture: true });
    context?.close().catch(() => undefined);
    context = null;
  }

  return speaker;
}

/** The browser's microphone into the workspace, after the user asks for it (and the browser's permission). */
function createMicrophone(path) {
  const microphone = { on: false, error: null, onChange: () => undefined, start, stop };
  let stream = null;
  let context = null;
  let socket = null;

  async function start() {
    if (microphone.on) return;
    microphone.on = true;
    microphone.error = null;
    microphone.onChange();
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } });
      if (!microphone.on) return stop();
      context = new AudioContext({ sampleRate: 48_000 });
      const source = context.createMediaStreamSource(stream);
      // ScriptProcessor rather than an AudioWorklet: no module file to serve, and 21 ms frames are plenty.
      const processor = context.createScriptProcessor(MIC_FRAME, 1, 1);
      const silence = context.createGain();
      silence.gain.value = 0;
      source.connect(processor);
      processor.connect(silence);
      silence.connect(context.destination);
      const ws = new WebSocket(socketUrl(path));
      ws.binaryType = 'arraybuffer';
      ws.addEventListener('close', () => {
        if (socket !== ws) return;
        microphone.error = 'The workspace does not take microphone input';
        stop();
      });
      socket = ws;
      processor.onaudioprocess = (event) => {
        if (ws.readyState !== WebSocket.OPEN || ws.bufferedAmount > 64 * 1024) return;
        const input = event.inputBuffer.getChannelData(0);
        const pcm = new Int16Array(input.length);
        for (let i = 0; i < input.length; i++) pcm[i] = Math.max(-1, Math.min(1, input[i])) * 0x7fff;
        ws.send(pcm.buffer);
      };
      await context.resume();
    } catch (err) {
      microphone.error = err?.name === 'NotAllowedError' ? 'Microphone permission was refused' : `Microphone: ${err?.message ?? err}`;
      stop();
    }
  }

  function stop() {
    const wasOn = microphone.on;
    microphone.on = false;
    const ws = socket;
    socket = null;
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close();
    for (const track of stream?.getTracks() ?? []) track.stop();
    stream = null;
    context?.close().catch(() => undefined);
    context = null;
    if (wasOn || microphone.error) microphone.onChange();
  }

  return microphone;
}
