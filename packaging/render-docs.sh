#!/usr/bin/env bash
# render-docs.sh BIN OUTDIR: every command's --help, as the binary prints it,
# into OUTDIR/commands/<command>_<subcommand>.txt, a man page OUTDIR/appliance.1
# built from the same texts, and OUTDIR/metrics.md from the metric
# registrations in the source (packaging/metricsdoc). Walking the binary's own
# command lists keeps the docs complete as commands are added.
set -euo pipefail
bin=${1:?usage: render-docs.sh BIN OUTDIR}
out=${2:?usage: render-docs.sh BIN OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
mkdir -p "$out/commands"
rm -f "$out"/commands/*.txt

# commands_of TEXT: the names in a help text's "Commands:" section.
commands_of() {
	awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1; next} on && !/^  / {on=0}' <<<"$1"
}

order=()
walk() { # walk NAME... : render `appliance NAME... --help`, recurse into groups
	local file text
	file=$(IFS=_; echo "$*")
	text=$("$bin" "$@" --help 2>&1 || true)
	printf '%s\n' "$text" >"$out/commands/$file.txt"
	order+=("$*")
	local sub
	for sub in $(commands_of "$text"); do
		walk "$@" "$sub"
	done
}

"$bin" help >"$out/commands/appliance.txt" 2>&1
for c in $(commands_of "$(cat "$out/commands/appliance.txt")"); do
	walk "$c"
done

# The man page: the root help as DESCRIPTION, each command's help verbatim
# (no-fill) under its own subsection. roff needs backslashes doubled and
# lines starting with . or ' protected.
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
date=$(git -C "$repo" log -1 --format=%cs 2>/dev/null || date +%F)
{
	echo ".TH APPLIANCE 1 \"$date\" \"appliance\" \"User Commands\""
	echo ".SH NAME"
	echo "appliance \\- a dataplane appliance for RDMA (RoCEv2) datacenter networks"
	echo ".SH SYNOPSIS"
	echo ".B appliance"
	echo "[global flags] COMMAND [flags] [args]"
	echo ".SH DESCRIPTION"
	echo ".nf"
	roff <"$out/commands/appliance.txt"
	echo ".fi"
	echo ".SH COMMANDS"
	for c in "${order[@]}"; do
		echo ".SS \"appliance $c\""
		echo ".nf"
		roff <"$out/commands/${c// /_}.txt"
		echo ".fi"
	done
	echo ".SH FILES"
	echo ".TP"
	echo ".I /etc/appliance/"
	echo "example configurations of the injector, DTA translator and DTA collector"
	echo ".TP"
	echo ".I /lib/systemd/system/appliance-*.service"
	echo "the services' units"
	echo ".SH SEE ALSO"
	echo "/usr/share/doc/appliance/commands/ (this text per command), /usr/share/doc/appliance/metrics.md"
} >"$out/appliance.1"

(cd "$repo" && go run ./packaging/metricsdoc) >"$out/metrics.md"
echo "rendered ${#order[@]} commands into $out/commands, $out/appliance.1, $out/metrics.md"
