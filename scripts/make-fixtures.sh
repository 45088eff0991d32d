#!/usr/bin/env bash
# Generates the media fixtures under test/fixtures/media/ and the sandbox samples under assets/sandbox/.
# Run once by hand (needs ffmpeg with libx264/libmp3lame/libvorbis, and sox); the outputs are committed,
# so CI never needs these tools. Everything is tiny on purpose: 32x32 pixels, 1-2 fps, low bitrates.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
fx="$root/test/fixtures/media"
sb="$root/assets/sandbox"
mkdir -p "$fx" "$sb"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

ff() { ffmpeg -v error -y -nostdin "$@"; }
# -map_metadata -1 and +bitexact keep the files byte-stable across runs (no encoder/creation-time tags).
x264=(-c:v libx264 -profile:v baseline -pix_fmt yuv420p -crf 45 -g 30 -fflags +bitexact -map_metadata -1)

video() { # name seconds [extra ffmpeg output flags...]
  local name="$1" seconds="$2"
  shift 2
  ff -f lavfi -i "testsrc2=s=32x32:r=1:d=$seconds" "${x264[@]}" "$@" "$fx/$name"
}

video video-5s.mp4 5 -movflags +faststart
video video-12s.mp4 12 -movflags +faststart
video video-35s.mp4 35 -movflags +faststart
video video-65s.mp4 65 -movflags +faststart
# ffmpeg writes moov after mdat unless told +faststart: this one keeps moov at the end, and its mdat
# (noise at 160 kbit/s, about 140 KB) is larger than the 64 KB a prober reads first over HTTP.
ff -f lavfi -i "nullsrc=s=64x64:r=4:d=7,geq=random(1)*255:128:128" -c:v libx264 -profile:v baseline \
  -pix_fmt yuv420p -b:v 160k -g 30 -fflags +bitexact -map_metadata -1 "$fx/late-moov-7s.mp4"
video clip-3s.mov 3 -f mov

# Video of 10 s with an AAC track of 10.05 s: mvhd says 10.05, the audio track's own length (with
# the encoder's priming samples) is about 10.10, so reading the wrong box shows.
ff -f lavfi -i "testsrc2=s=32x32:r=2:d=10" -f lavfi -i "sine=f=440:sample_rate=22050:d=10.05" \
  "${x264[@]}" -c:a aac -b:a 16k -ac 1 -movflags +faststart "$fx/av-10s.mp4"

# Audio. No text-to-speech engine is assumed: "speech" is a warbling, pausing tone in the voice range.
sox -n -r 16000 -c 1 "$tmp/speech.wav" synth 8 sine 180-320 tremolo 3 90
ff -i "$tmp/speech.wav" -c:a libmp3lame -b:a 32k -ac 1 -fflags +bitexact -map_metadata -1 "$fx/speech-8s.mp3"
ff -f lavfi -i "sine=f=440:sample_rate=44100:d=90.2" -c:a libmp3lame -b:a 32k -ac 1 -fflags +bitexact \
  -map_metadata -1 "$fx/tone-90.2s.mp3"
sox -n -r 22050 -c 1 "$tmp/song.wav" synth 30 pluck C3 pluck E3 pluck G3 tremolo 2 60 gain -6
ff -i "$tmp/song.wav" -c:a libmp3lame -b:a 24k -ac 1 -fflags +bitexact -map_metadata -1 "$fx/song-30s.mp3"
sox -n -r 8000 -c 1 -b 16 "$fx/voice-4s.wav" synth 4 sine 150-260 tremolo 4 80 gain -10
sox -n -r 8000 -c 1 -b 16 "$fx/voice-2s.wav" synth 2 sine 150-260 tremolo 4 80 gain -10
sox -n -r 8000 -c 1 -b 16 "$tmp/one.wav" synth 1 sine 440 gain -10
ff -i "$tmp/one.wav" -c:a flac -fflags +bitexact -map_metadata -1 "$fx/clip-1s.flac"
ff -i "$tmp/one.wav" -c:a libvorbis -q:a 0 -fflags +bitexact -map_metadata -1 "$fx/clip-1s.ogg"
ff -i "$tmp/one.wav" -c:a aac -b:a 16k -fflags +bitexact -map_metadata -1 -movflags +faststart "$fx/clip-1s.m4a"

# Images: a smiling face, and a stick figure on a light background.
ff -f lavfi -i "color=c=white:s=64x64:d=1" -frames:v 1 -vf "geq=\
r='if(lt(hypot(X-32,Y-32),28),if(lt(hypot(X-22,Y-24),4)+lt(hypot(X-42,Y-24),4)+between(hypot(X-32,Y-32),14,17)*gt(Y,36),40,240),255)':\
g='if(lt(hypot(X-32,Y-32),28),if(lt(hypot(X-22,Y-24),4)+lt(hypot(X-42,Y-24),4)+between(hypot(X-32,Y-32),14,17)*gt(Y,36),30,200),255)':\
b='if(lt(hypot(X-32,Y-32),28),if(lt(hypot(X-22,Y-24),4)+lt(hypot(X-42,Y-24),4)+between(hypot(X-32,Y-32),14,17)*gt(Y,36),30,120),255)'" \
  "$fx/face.png"
ff -f lavfi -i "color=c=white:s=48x96:d=1" -frames:v 1 -vf "geq=\
lum='if(lt(hypot(X-24,Y-14),9)+between(X,22,26)*between(Y,22,60)+lt(abs((X-24)-(Y-30)*0.6),2)*between(Y,30,46)+lt(abs((X-24)+(Y-30)*0.6),2)*between(Y,30,46)+lt(abs((X-24)-(Y-60)*0.5),2)*between(Y,60,90)+lt(abs((X-24)+(Y-60)*0.5),2)*between(Y,60,90),30,235)':cb=128:cr=128" \
  "$fx/person.png"

# Sandbox result samples: a test pattern a person recognises in a gallery, and a short clip that
# Chromium plays (H.264 baseline, yuv420p, moov first).
ff -f lavfi -i "testsrc2=s=256x256:r=1:d=1" -frames:v 1 "$sb/result.png"
ff -f lavfi -i "testsrc2=s=128x128:r=10:d=4" -c:v libx264 -profile:v baseline -pix_fmt yuv420p -crf 38 \
  -fflags +bitexact -map_metadata -1 -movflags +faststart "$sb/result.mp4"

# The MP3 frame src/media/synth.ts repeats: MPEG-1 Layer III, 48 kHz mono 32 kbps (96 bytes a frame,
# never padded), no bit reservoir so that every frame decodes alone, a 500 Hz tone (exactly 12 periods
# per 1152-sample frame, so repeated frames join without a click).
ff -f lavfi -i "sine=f=500:sample_rate=48000:d=1" -af volume=0.5 -c:a libmp3lame -b:a 32k -ac 1 -reservoir 0 \
  -write_xing 0 -id3v2_version 0 -fflags +bitexact -map_metadata -1 "$sb/frame-source.mp3"

ls -l "$fx" "$sb"
du -ch "$fx" "$sb" | tail -1
