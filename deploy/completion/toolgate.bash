# bash completion for toolgate(1).
#
# Nothing is listed here: commands, options and --limit keys come from the
# toolgate being completed (`toolgate __complete ...`, from its command
# table and its config key table), so the completion cannot drift from the
# binary. Installed as share/bash-completion/completions/toolgate.

_toolgate_words()
{
    "$1" __complete "${@:2}" 2>/dev/null
}

_toolgate()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion -n = || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    local tg=${words[0]} cmd="" sub="" i

    # The command words typed so far; after wrap's or check's "--" the
    # words are the agent command's: complete file names.
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        -*) ;;
        *)
            if [[ -z $cmd ]]; then
                cmd=${words[i]}
            elif [[ -z $sub && ($cmd == audit || $cmd == token) ]]; then
                sub=${words[i]}
            fi
            ;;
        esac
    done

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$(_toolgate_words "$tg" commands)" -- "$cur"))
        return
    fi
    if [[ ($cmd == audit || $cmd == token) && -z $sub ]]; then
        COMPREPLY=($(compgen -W "$(_toolgate_words "$tg" subcommands "$cmd")" -- "$cur"))
        return
    fi

    # --limit KEY=VALUE: the key table's --limit keys, then a tool's.
    local limit_val=""
    if [[ $prev == --limit ]]; then
        limit_val=$cur
    elif [[ $cur == --limit=* ]]; then
        limit_val=${cur#--limit=}
    fi
    if [[ $prev == --limit || $cur == --limit=* ]]; then
        local keys
        if [[ $limit_val == tools.*.* ]]; then
            local tool=${limit_val#tools.}
            tool=${tool%.*}
            keys=$(_toolgate_words "$tg" limit-keys tool | sed "s/^/tools.$tool./")
        else
            keys=$(_toolgate_words "$tg" limit-keys)
        fi
        COMPREPLY=($(compgen -W "$keys" -- "$limit_val"))
        compopt -o nospace 2>/dev/null
        return
    fi
    case $cur in
    --config=* | --audit=*)
        COMPREPLY=($(compgen -f -P "${cur%%=*}=" -- "${cur#*=}"))
        return
        ;;
    esac
    case $prev in
    --config | --audit)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    esac
    if [[ $cmd == "audit" && $sub == verify && $cur != -* ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
        return
    fi

    local opts
    opts=$(_toolgate_words "$tg" options "$cmd" ${sub:+"$sub"})
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    # an option that takes a value ends in '=': no space after it
    [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
}

complete -F _toolgate toolgate
