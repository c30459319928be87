# root's .bashrc in the cns zone (lib/util.sh installs it): the data
# center and the zone's alias (cns0) in the prompt, cns's commands and
# man pages in the paths.
export PATH=/opt/triton/cns/bin:/opt/local/bin:/opt/local/sbin:/usr/sbin:/usr/bin:/sbin
export MANPATH=/opt/local/man:/usr/share/man
if [[ -n ${PS1:-} ]]; then
	shopt -s checkwinsize histappend
	HISTCONTROL=ignoreboth
	# shellcheck source=/dev/null
	[[ -f /.dcinfo ]] && . /.dcinfo
	if [[ ! -s /var/smartdc/alias ]]; then
		mkdir -p /var/smartdc && /usr/sbin/mdata-get sdc:alias >/var/smartdc/alias 2>/dev/null
	fi
	PS1="[\u@\h (${SDC_DATACENTER_NAME:-}${SDC_DATACENTER_NAME:+:}$(head -1 /var/smartdc/alias 2>/dev/null)) \w]\\$ "
fi
